//! Ordering hazards and payload mistakes the CVO would not catch, found without a cluster.
//!
//! Each rule is one module with a `check` function over a [`Context`]: the payload, its
//! updating-mode plan, and optionally the previous payload the cluster runs now.
//!
//! | rule | module | severity |
//! |---|---|---|
//! | `delete-before-last-user` | [`delete_before_user`] | error (warning for optional references, orphaned or deleted users) |
//! | `deleted-but-used` | [`delete_before_user`] | error (warning for optional references) |
//! | `applied-and-deleted` | [`applied_and_deleted`] | error |
//! | `crd-order`, `namespace-order` | [`crd_order`], [`namespace_order`] | error with `--previous`, warning without |
//! | `unserved-kind`, `missing-namespace` | [`crd_order`], [`namespace_order`] | info |
//! | `ignored-tombstone` | [`tombstones`] | warning or info |
//! | `duplicate-object` | [`duplicates`] | error when the copies differ, warning otherwise |
//! | `duplicate-key` | [`duplicate_keys`] (run by the caller with the payload's directory) | warning |
//! | `cluster-operator-without-workload`, `version-placeholder` | [`cluster_operators`] | warning |
//! | `schema` | [`schema`] (run by the caller with a compiled [`crate::schema::Catalog`]) | error (warning for a dropped namespace, info for unchecked CEL) |
//! | `invalid-delete-annotation` | [`delete_annotation`] | error |
//! | `not-rolled-out` | [`not_rolled_out`] | warning (with `--previous`) |
//! | `rights-lost-before-rollout` | [`rights_narrowed`] | error (with `--previous`) |

pub mod applied_and_deleted;
pub mod cluster_operators;
pub mod crd_order;
pub mod delete_annotation;
pub mod delete_before_user;
pub mod duplicate_keys;
pub mod duplicates;
pub mod namespace_order;
pub mod not_rolled_out;
pub mod report;
pub mod rights_narrowed;
pub mod schema;
pub mod tombstones;

use std::cmp::Reverse;
use std::fmt;

use rayon::prelude::*;
use serde::Serialize;

use super::placement::Placements;
use crate::manifest::{Manifest, ObjectId};
use crate::payload::Excluded;
use crate::plan::{Action, Plan, Task};

/// How bad a finding is. An error makes `minicvo lint` exit with 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; nothing breaks by itself.
    Info,
    /// Likely a mistake, or breaks only on some clusters.
    Warning,
    /// Breaks an update or leaves the cluster in a wrong state.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// The rule a finding comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// An object is deleted while pods of the previous release may still use it.
    DeleteBeforeLastUser,
    /// An object is deleted although a workload of this payload still uses it.
    DeletedButUsed,
    /// One payload both applies and deletes an object.
    AppliedAndDeleted,
    /// A custom resource can run before or in parallel with the CRD that defines it.
    CrdOrder,
    /// No CRD in the payload (or the previous one) defines a kind the payload uses.
    UnservedKind,
    /// A namespaced object can run before or in parallel with its Namespace.
    NamespaceOrder,
    /// No Namespace manifest creates a namespace the payload uses.
    MissingNamespace,
    /// A delete manifest the chosen profile filters out.
    IgnoredTombstone,
    /// The same object in two files.
    DuplicateObject,
    /// A mapping repeats a key; the CVO keeps the last value.
    DuplicateKey,
    /// A ClusterOperator whose component ships no Deployment or DaemonSet.
    ClusterOperatorWithoutWorkload,
    /// A ClusterOperator version still holds the `0.0.1-snapshot` placeholder.
    VersionPlaceholder,
    /// An object the API server would refuse (offline schema validation).
    Schema,
    /// A `release.openshift.io/delete` value other than `"true"`.
    InvalidDeleteAnnotation,
    /// A field changed since the previous payload that the CVO's merge never writes.
    NotRolledOut,
    /// An apply narrows a role or binding the previous payload's pods still need.
    RightsLostBeforeRollout,
}

impl Rule {
    /// The rule's name, as printed and in JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Rule::DeleteBeforeLastUser => "delete-before-last-user",
            Rule::DeletedButUsed => "deleted-but-used",
            Rule::AppliedAndDeleted => "applied-and-deleted",
            Rule::CrdOrder => "crd-order",
            Rule::UnservedKind => "unserved-kind",
            Rule::NamespaceOrder => "namespace-order",
            Rule::MissingNamespace => "missing-namespace",
            Rule::IgnoredTombstone => "ignored-tombstone",
            Rule::DuplicateObject => "duplicate-object",
            Rule::DuplicateKey => "duplicate-key",
            Rule::ClusterOperatorWithoutWorkload => "cluster-operator-without-workload",
            Rule::VersionPlaceholder => "version-placeholder",
            Rule::Schema => "schema",
            Rule::InvalidDeleteAnnotation => "invalid-delete-annotation",
            Rule::NotRolledOut => "not-rolled-out",
            Rule::RightsLostBeforeRollout => "rights-lost-before-rollout",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which payload a location is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The payload being linted.
    Payload,
    /// The `--previous` payload.
    Previous,
}

/// A document in a payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    /// Which payload.
    pub payload: Side,
    /// File path relative to the payload root, e.g. `release-manifests/0000_80_x_03_rbac.yaml`.
    pub file: String,
    /// Document index in the file, from 0.
    pub document: usize,
    /// 1-based line where the document starts.
    pub line: usize,
    /// The object.
    pub object: ObjectId,
    /// Run-level parsed from the file name.
    #[serde(rename = "runLevel")]
    pub run_level: Option<String>,
}

impl Location {
    /// The location of a manifest.
    #[must_use]
    pub fn of(m: &Manifest, payload: Side) -> Self {
        Location {
            payload,
            file: m.path(),
            document: m.document,
            line: m.line,
            object: m.id.clone(),
            run_level: crate::plan::breaks::level_and_component(&m.file).map(|k| k.0),
        }
    }

    /// `file#document`.
    #[must_use]
    pub fn short(&self) -> String {
        format!("{}#{}", self.file, self.document)
    }
}

/// Another document a finding involves, and its part in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Related {
    /// What the document is to the finding, e.g. `user`, `update`, `wait`, `crd`.
    pub role: String,
    /// Where it is.
    #[serde(flatten)]
    pub location: Location,
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// How bad.
    pub severity: Severity,
    /// The document at fault; `None` for notes about the run itself.
    #[serde(flatten)]
    pub location: Option<Location>,
    /// One line saying what is wrong.
    pub message: String,
    /// One line saying what to do.
    pub hint: Option<String>,
    /// Other documents involved.
    pub related: Vec<Related>,
}

impl Finding {
    /// A finding at a document.
    #[must_use]
    pub fn at(rule: Rule, severity: Severity, location: Location, message: String) -> Self {
        Finding {
            rule,
            severity,
            location: Some(location),
            message,
            hint: None,
            related: Vec::new(),
        }
    }

    /// Adds the hint.
    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a related document.
    #[must_use]
    pub fn related(mut self, role: impl Into<String>, location: Location) -> Self {
        self.related.push(Related {
            role: role.into(),
            location,
        });
        self
    }
}

/// The previous payload, the one the cluster runs before the update.
#[derive(Debug, Clone, Copy)]
pub struct Previous<'a> {
    /// Its updating-mode plan, which holds every manifest the load included (loaded with
    /// the same filters).
    pub plan: &'a Plan,
}

/// What every rule looks at.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// The linted payload's updating-mode plan, which holds every manifest the load
    /// included (loaded with the profile's filters).
    pub plan: &'a Plan,
    /// The manifests the load-time filters excluded from the linted payload.
    pub excluded: &'a [Excluded],
    /// Placement and ordering facts of `plan`.
    pub placements: Placements,
    /// The previous payload, when given.
    pub previous: Option<Previous<'a>>,
}

impl<'a> Context<'a> {
    /// Builds the context. The plans own the manifests ([`crate::plan::from_payload`]).
    #[must_use]
    pub fn new(plan: &'a Plan, excluded: &'a [Excluded], previous: Option<Previous<'a>>) -> Self {
        Context {
            plan,
            excluded,
            placements: Placements::new(plan),
            previous,
        }
    }

    /// The last ClusterOperator wait of task `u`'s component: where the component's new pods
    /// are known to be in charge.
    #[must_use]
    pub fn wait_of(&self, u: usize) -> Option<usize> {
        let component = self.plan.tasks[u].component.as_ref()?;
        self.plan
            .tasks
            .iter()
            .rev()
            .find(|t| {
                t.action == crate::plan::Action::Wait && t.component.as_ref() == Some(component)
            })
            .map(|t| t.id)
    }

    /// Whether task `a` always finishes before task `b` starts.
    #[must_use]
    pub fn runs_before(&self, a: usize, b: usize) -> bool {
        self.placements.runs_before(self.plan, a, b)
    }

    /// Describes a task `a` that does not always run after `b`: `before` when `a` always
    /// finishes before `b` starts, `in parallel with` otherwise.
    #[must_use]
    pub fn before_or_parallel(&self, a: usize, b: usize) -> &'static str {
        if self.runs_before(a, b) {
            "before"
        } else {
            "in parallel with"
        }
    }

    /// The location of a task of the linted payload.
    #[must_use]
    pub fn location(&self, task: usize) -> Location {
        Location::of(&self.plan.tasks[task].manifest, Side::Payload)
    }
}

/// Whether a task puts its object on the cluster (apply, create-only, or a ClusterOperator's
/// precreation).
#[must_use]
pub fn creates(t: &Task) -> bool {
    matches!(t.action, Action::Apply | Action::CreateOnly | Action::Wait)
}

/// Whether a task applies or creates its object (not a ClusterOperator wait).
#[must_use]
pub fn applies(t: &Task) -> bool {
    matches!(t.action, Action::Apply | Action::CreateOnly)
}

/// The rules, in the order their findings are gathered before sorting.
const RULES: [fn(&Context) -> Vec<Finding>; 10] = [
    delete_before_user::check,
    applied_and_deleted::check,
    crd_order::check,
    namespace_order::check,
    tombstones::check,
    duplicates::check,
    cluster_operators::check,
    delete_annotation::check,
    not_rolled_out::check,
    rights_narrowed::check,
];

/// Runs every rule (side by side) and returns the findings, errors first, then by file and
/// document.
#[must_use]
pub fn lint(cx: &Context) -> Vec<Finding> {
    let mut findings: Vec<Finding> = RULES.par_iter().flat_map_iter(|rule| rule(cx)).collect();
    sort(&mut findings);
    findings
}

/// Sorts findings: most severe first, then by payload position, notes without a document last.
pub fn sort(findings: &mut [Finding]) {
    fn key(f: &Finding) -> (Reverse<Severity>, bool, Option<(&str, usize)>, Rule) {
        (
            Reverse(f.severity),
            f.location.is_none(),
            f.location.as_ref().map(|l| (l.file.as_str(), l.document)),
            f.rule,
        )
    }
    findings.sort_by(|a, b| key(a).cmp(&key(b)).then_with(|| a.message.cmp(&b.message)));
}

#[cfg(test)]
pub(crate) mod testutil;
