//! `schema`: every object the payload creates, checked offline as the API server would check
//! it on a create with strict field validation ([`crate::schema`]).
//!
//! Built-in kinds are checked against the stored schemas of the chosen Kubernetes version,
//! custom resources against their CRD from the payload, `--crds DIR` or the previous payload
//! (in that order of precedence). A violation is an error; a namespace on a cluster-scoped
//! kind, which the server drops, is a warning; so is an unknown field of a kind the CVO decodes
//! into its Go type ([`typed_kind`]: RBAC kinds, Deployments, ConfigMaps, CRDs, …), which the
//! decoding drops before anything is sent; a CRD with CEL rules is noted once (info), as CEL is
//! not evaluated offline. Objects of kinds with no known schema are left to
//! `unserved-kind`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rayon::prelude::*;

use super::{Context, Finding, Location, Rule, Severity, Side, applies};
use crate::manifest::Manifest;
use crate::merge::typed_kind;
use crate::schema::{BuiltIn, Catalog, CompiledCrd, SchemaError, Verdict, Violation};
use serde_json::Value;

/// The catalog for `cx`: the built-in kinds, then the CRDs of the previous payload, of
/// `extra_crds` (`--crds DIR`) and of the payload, later ones replacing earlier ones (a
/// replaced CRD is not compiled, so its schema errors do not count).
///
/// # Errors
/// A CRD schema that does not compile (it names the file and document).
pub fn catalog(
    builtin: Arc<BuiltIn>,
    cx: &Context,
    extra_crds: &[Manifest],
) -> Result<Catalog, SchemaError> {
    catalog_with(builtin, cx, extra_crds, |_| None)
}

/// [`catalog`], taking the CRDs compiled before from `ready`.
fn catalog_with(
    builtin: Arc<BuiltIn>,
    cx: &Context,
    extra_crds: &[Manifest],
    ready: impl FnMut(&Value) -> Option<CompiledCrd>,
) -> Result<Catalog, SchemaError> {
    let mut catalog = Catalog::new(builtin);
    let previous = cx
        .previous
        .iter()
        .flat_map(|p| p.plan.tasks.iter().map(|t| &t.manifest));
    let payload = cx
        .plan
        .tasks
        .iter()
        .filter(|t| applies(t))
        .map(|t| &t.manifest);
    let crds: Vec<(&Value, &Manifest)> = previous
        .chain(extra_crds)
        .chain(payload)
        .filter(|m| m.is_crd())
        .map(|m| (&*m.object, m))
        .collect();
    catalog
        .add_crds_with(&crds, ready)
        .map_err(|(m, e)| SchemaError::Compile {
            schema: format!("{}: document {} (line {})", m.path(), m.document, m.line),
            message: e.to_string(),
        })?;
    Ok(catalog)
}

/// Checks every task that applies or creates an object, in parallel. ClusterOperator
/// manifests are left out: the CVO never sends them, it creates its own object of the name.
#[must_use]
pub fn check(cx: &Context, catalog: &Catalog) -> Vec<Finding> {
    let all = cx
        .plan
        .tasks
        .par_iter()
        .enumerate()
        .filter(|(_, t)| applies(t))
        .map(|(i, t)| (i, catalog.validate(&t.manifest.object)))
        .collect();
    findings(cx, all)
}

/// Schema work done on a payload's manifests before its plan exists, so that it can run
/// beside other work (the load of the previous payload): every CRD compiled and every object
/// of a built-in kind checked. A built-in kind never looks at a CRD ([`Catalog::validate`]
/// checks built-in kinds first), so these verdicts are those of the whole catalog.
///
/// Objects are known by identity: they are shared by the plan built from the same manifests
/// and never change after the load; `Early` holds them, so an address cannot be reused.
#[derive(Debug)]
pub struct Early {
    builtin: Arc<BuiltIn>,
    objects: Vec<Arc<Value>>,
    crds: HashMap<usize, CompiledCrd>,
    verdicts: HashMap<usize, Verdict>,
}

/// The address that identifies an object for [`Early`].
fn identity(object: &Value) -> usize {
    std::ptr::from_ref(object) as usize
}

/// Compiles the CRDs of `manifests` and checks their objects of built-in kinds, in parallel
/// (see [`Early`]).
#[must_use]
pub fn early(builtin: Arc<BuiltIn>, manifests: &[Manifest]) -> Early {
    let builtin_only = Catalog::new(builtin.clone());
    let (crds, verdicts) = rayon::join(
        || {
            manifests
                .par_iter()
                .filter(|m| m.is_crd())
                .map(|m| (identity(&m.object), CompiledCrd::new(&m.object)))
                .collect()
        },
        || {
            manifests
                .par_iter()
                .filter_map(|m| {
                    let verdict = builtin_only.validate(&m.object);
                    (verdict != Verdict::NoSchema).then(|| (identity(&m.object), verdict))
                })
                .collect()
        },
    );
    Early {
        builtin,
        objects: manifests.iter().map(|m| m.object.clone()).collect(),
        crds,
        verdicts,
    }
}

/// The findings of [`check`] on [`catalog`], with the work `early` did on the payload's
/// manifests: only the CRDs and objects it did not see are compiled and checked here.
///
/// # Errors
/// As [`catalog`].
pub fn check_early(
    early: Early,
    cx: &Context,
    extra_crds: &[Manifest],
) -> Result<Vec<Finding>, SchemaError> {
    let Early {
        builtin,
        objects,
        mut crds,
        verdicts: known,
    } = early;
    let catalog = catalog_with(builtin, cx, extra_crds, |crd| crds.remove(&identity(crd)))?;
    let all: Vec<(usize, Verdict)> = cx
        .plan
        .tasks
        .par_iter()
        .enumerate()
        .filter(|(_, t)| applies(t))
        .map(|(i, t)| {
            let object = &*t.manifest.object;
            let verdict = known.get(&identity(object)).cloned();
            (i, verdict.unwrap_or_else(|| catalog.validate(object)))
        })
        .collect();
    // Held until every address has been looked up.
    drop(objects);
    Ok(findings(cx, all))
}

/// An unknown field of a kind the CVO decodes into its Go type ([`typed_kind`]): the decoding
/// drops the field, so the CVO never sends it and the API server never sees it. Strict field
/// validation would refuse it, but nothing breaks: a warning.
fn dropped_field(location: Location, kind: &str, v: &Violation) -> Finding {
    Finding::at(
        Rule::Schema,
        Severity::Warning,
        location,
        format!(
            "{v}: the CVO decodes a {kind} into its Go type, which drops the field, so it is never sent (the API server would refuse it under strict field validation)"
        ),
    )
    .hint("remove the field, or correct its name: the cluster never gets it")
}

/// The findings of verdicts in task order: one per violation, and one note per CRD whose CEL
/// rules were not evaluated.
fn findings(cx: &Context, verdicts: Vec<(usize, Verdict)>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut cel: BTreeMap<String, Location> = BTreeMap::new();
    for (i, verdict) in verdicts {
        let Verdict::Checked {
            violations,
            cel_unchecked,
        } = verdict
        else {
            continue;
        };
        let m = &cx.plan.tasks[i].manifest;
        let location = Location::of(m, Side::Payload);
        if let Some(crd) = cel_unchecked {
            cel.entry(crd).or_insert_with(|| location.clone());
        }
        let typed = typed_kind(&m.api_version, &m.id.kind).is_some();
        for v in violations {
            if v.unknown_field && typed && !v.warning {
                findings.push(dropped_field(location.clone(), &m.id.kind, &v));
                continue;
            }
            let severity = if v.warning {
                Severity::Warning
            } else {
                Severity::Error
            };
            findings.push(Finding::at(
                Rule::Schema,
                severity,
                location.clone(),
                v.to_string(),
            ));
        }
    }
    for (crd, location) in cel {
        findings.push(
            Finding::at(
                Rule::Schema,
                Severity::Info,
                location,
                format!("CEL rules (x-kubernetes-validations) of CRD {crd} not checked offline"),
            )
            .hint("the API server evaluates them; `minicvo diff` runs them by dry run"),
        );
    }
    findings
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::analysis::lint::testutil::*;

    #[test]
    fn a_typo_in_a_kind_the_cvo_sends_as_is_is_an_error_at_its_document() {
        // A PodDisruptionBudget takes the CVO's generic path: the manifest is sent unchanged.
        let pdb = obj(
            "policy/v1",
            "PodDisruptionBudget",
            "ns1",
            "p",
            "",
            "spec:\n  minAvailable: 1\n  selectr: {matchLabels: {a: b}}\n",
        );
        let f = run_schema(&[("0000_50_a_01_pdb.yaml", &pdb)]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(f[0].message, "unknown field \"spec.selectr\"");
        assert_eq!(
            f[0].location.as_ref().unwrap().file,
            "release-manifests/0000_50_a_01_pdb.yaml"
        );
    }

    #[test]
    fn user_names_of_a_cluster_role_binding_is_a_warning_the_cvo_drops_it() {
        // The legacy `userNames` of 4.21's and 4.22's node-tuning ClusterRoleBindings.
        let crb = obj(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            "",
            "tuned",
            "",
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: tuned}\nsubjects:\n- {kind: ServiceAccount, name: tuned, namespace: ns1}\nuserNames:\n- system:serviceaccount:ns1:tuned\n",
        );
        let f = run_schema(&[("0000_50_a_01_rbac.yaml", &crb)]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(
            f[0].message.starts_with(
                "unknown field \"userNames\": the CVO decodes a ClusterRoleBinding into its Go type, which drops the field"
            ),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn a_typo_in_a_deployment_is_a_warning_the_cvo_drops_it() {
        let deploy = obj(
            "apps/v1",
            "Deployment",
            "ns1",
            "d",
            "",
            "spec:\n  replica: 3\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: x}]}\n",
        );
        let f = run_schema(&[("0000_50_a_01_deploy.yaml", &deploy)]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(
            f[0].message
                .starts_with("unknown field \"spec.replica\": the CVO decodes a Deployment"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn a_cr_is_checked_against_the_payloads_crd_and_cel_is_noted_once() {
        let crd = obj(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "",
            "widgets.example.com",
            "",
            "spec:\n  group: example.com\n  scope: Cluster\n  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            x-kubernetes-validations: [{rule: 'true'}]\n            properties:\n              size: {type: integer}\n",
        );
        let w1 = obj(
            "example.com/v1",
            "Widget",
            "",
            "w1",
            "",
            "spec: {size: big}\n",
        );
        let w2 = obj(
            "example.com/v1",
            "Widget",
            "",
            "w2",
            "",
            "spec: {size: 1}\n",
        );
        let crs = format!("{w1}---\n{w2}");
        let f = run_schema(&[
            ("0000_10_a_00_crd.yaml", &crd),
            ("0000_20_a_01_cr.yaml", &crs),
        ]);
        let messages: Vec<&str> = f.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "spec.size: Invalid value: \"string\": must be of type integer",
                "CEL rules (x-kubernetes-validations) of CRD widgets.example.com not checked offline"
            ]
        );
    }

    fn run_schema(files: &[(&str, &str)]) -> Vec<Finding> {
        let dir = write(files);
        let (excluded, plan) = load_and_plan(dir.path(), &crate::filter::Filters::default());
        let cx = Context::new(&plan, &excluded, None);
        let builtin = Arc::new(BuiltIn::load("1.37").unwrap());
        let catalog = catalog(builtin, &cx, &[]).unwrap();
        check(&cx, &catalog)
    }
}
