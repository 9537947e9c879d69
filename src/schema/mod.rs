//! Offline schema validation: every object checked as the API server of a Kubernetes version
//! checks it on a create with strict field validation, without a cluster.
//!
//! - Built-in kinds: the OpenAPI v3 documents of the API server, stored per minor version in
//!   `schemas/kube-<minor>.json.gz` by `hack/fetch-openapi.sh` and compiled in
//!   ([`BuiltIn::load`]).
//! - Custom resources: the `openAPIV3Schema` of their CRD's version, with the structural-schema
//!   rules ([`Catalog::add_crd`]). CEL rules (`x-kubernetes-validations`) are not evaluated;
//!   the `cel_unchecked` field of [`Verdict::Checked`] says when an object's schema has some.
//! - Names and namespaces per kind ([`names`]), label and annotation keys and values.
//!
//! Everything is compiled once into a [`Catalog`], which is `Sync`: objects are checked in
//! parallel.

mod builtin;
pub mod compile;
pub mod kinds;
pub mod names;
pub mod validate;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::Value;

pub use builtin::{BuiltIn, DEFAULT_KUBE_VERSION, KUBE_VERSIONS};
use compile::{NodeId, Schemas};
use names::NameRule;
use validate::{Walk, quote};

/// A schema that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// No stored schemas for this version.
    #[error("no stored schemas for Kubernetes {version}; stored: {}", KUBE_VERSIONS.join(", "))]
    UnknownVersion {
        /// The version asked for.
        version: String,
    },
    /// The stored document does not decode.
    #[error("stored schemas of Kubernetes {version}: {message}")]
    Stored {
        /// The version.
        version: String,
        /// What is wrong.
        message: String,
    },
    /// A schema does not compile.
    #[error("schema {schema}: {message}")]
    Compile {
        /// The schema (name or CRD).
        schema: String,
        /// What is wrong.
        message: String,
    },
}

/// One problem with an object, at a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The path, e.g. `spec.template.spec.containers[0].imagePullPolicy`; empty for the root.
    pub path: String,
    /// What the API server would say after the path, e.g. `Required value`.
    pub message: String,
    /// A field the schema does not declare (strict field validation refuses it).
    pub unknown_field: bool,
    /// Not refused by the server, but worth knowing.
    pub warning: bool,
}

impl Violation {
    /// An error at `path`.
    #[must_use]
    pub fn error(path: &str, message: String) -> Self {
        Violation {
            path: path.to_owned(),
            message,
            unknown_field: false,
            warning: false,
        }
    }

    /// An unknown field at `path`.
    #[must_use]
    pub fn unknown_field(path: &str) -> Self {
        Violation {
            path: path.to_owned(),
            message: String::new(),
            unknown_field: true,
            warning: false,
        }
    }

    fn warning(path: &str, message: String) -> Self {
        Violation {
            warning: true,
            ..Violation::error(path, message)
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.unknown_field {
            write!(f, "unknown field \"{}\"", self.path)
        } else if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// What checking one object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Checked; the violations (empty when the server would accept it).
    Checked {
        /// Errors and warnings, in document order.
        violations: Vec<Violation>,
        /// The CRD whose CEL rules were not evaluated, if the object's schema has any.
        cel_unchecked: Option<String>,
    },
    /// No schema is known for the object's kind and version.
    NoSchema,
}

impl Verdict {
    /// Whether the server would refuse the object (an error violation); `None` when unknown.
    #[must_use]
    pub fn rejected(&self) -> Option<bool> {
        match self {
            Verdict::Checked { violations, .. } => Some(violations.iter().any(|v| !v.warning)),
            Verdict::NoSchema => None,
        }
    }
}

/// Custom resources whose missing top-level required fields OpenShift's kube-apiserver
/// fills in by admission before validation (`security.openshift.io/DefaultSecurityContext
/// Constraints`): reported as warnings.
const ADMISSION_DEFAULTED: &[(&str, &str)] =
    &[("security.openshift.io", "SecurityContextConstraints")];

#[derive(Debug)]
struct CrdVersion {
    root: Option<NodeId>,
    served: bool,
    cel: bool,
}

#[derive(Debug)]
struct Crd {
    name: String,
    namespaced: bool,
    schemas: Schemas,
    versions: HashMap<String, CrdVersion>,
}

/// A CRD compiled ahead of its catalog (say while other work runs), for
/// [`Catalog::add_crds_with`]; a schema that does not compile is kept as its error, which
/// counts only if the catalog keeps the CRD.
#[derive(Debug)]
pub struct CompiledCrd(Result<Option<(CrdKey, Crd)>, SchemaError>);

impl CompiledCrd {
    /// Compiles `crd`, an `apiextensions.k8s.io/v1` object.
    #[must_use]
    pub fn new(crd: &Value) -> Self {
        CompiledCrd(compile_crd(crd))
    }
}

/// Built-in kinds and CRDs: everything objects are checked against.
#[derive(Debug)]
pub struct Catalog {
    builtin: Arc<BuiltIn>,
    crds: HashMap<(String, String), Crd>,
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// A CRD's group and kind.
type CrdKey = (String, String);

/// The group and kind a CRD defines, when it names both.
fn crd_key(crd: &Value) -> Option<(&str, &str)> {
    let spec = &crd["spec"];
    Some((
        spec["group"].as_str()?,
        spec.pointer("/names/kind").and_then(Value::as_str)?,
    ))
}

/// Compiles a CRD's schemas; `None` for a CRD without group or kind.
fn compile_crd(crd: &Value) -> Result<Option<(CrdKey, Crd)>, SchemaError> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let spec = &crd["spec"];
    let Some((group, kind)) = crd_key(crd) else {
        return Ok(None);
    };
    let mut schemas = Schemas::default();
    let mut versions = HashMap::new();
    for v in spec["versions"].as_array().into_iter().flatten() {
        let Some(vname) = v["name"].as_str() else {
            continue;
        };
        let schema = v.pointer("/schema/openAPIV3Schema");
        let root = match schema {
            Some(s) => {
                let id = schemas.compile_structural(s, &format!("{name} {vname}"))?;
                schemas.nodes[id].embedded = true;
                Some(id)
            }
            None => None,
        };
        let cel = schema.is_some_and(has_cel);
        versions.insert(
            vname.to_owned(),
            CrdVersion {
                root,
                served: v["served"].as_bool().unwrap_or(false),
                cel,
            },
        );
    }
    Ok(Some((
        (group.to_owned(), kind.to_owned()),
        Crd {
            name,
            namespaced: spec["scope"].as_str() != Some("Cluster"),
            schemas,
            versions,
        },
    )))
}

impl Catalog {
    /// A catalog of the built-in kinds only.
    #[must_use]
    pub fn new(builtin: Arc<BuiltIn>) -> Self {
        Catalog {
            builtin,
            crds: HashMap::new(),
        }
    }

    /// Adds (or replaces) the CRD `crd`, an `apiextensions.k8s.io/v1` object.
    ///
    /// # Errors
    /// A schema that does not compile.
    pub fn add_crd(&mut self, crd: &Value) -> Result<(), SchemaError> {
        if let Some((key, compiled)) = compile_crd(crd)? {
            self.crds.insert(key, compiled);
        }
        Ok(())
    }

    /// Adds CRDs in order, a later one replacing an earlier one of the same group and kind.
    /// Only the CRDs that stay are compiled, in parallel.
    ///
    /// # Errors
    /// The first CRD, in the given order, whose schema does not compile; `context` names it.
    pub fn add_crds<C>(&mut self, crds: &[(&Value, C)]) -> Result<(), (C, SchemaError)>
    where
        C: Clone + Send + Sync,
    {
        self.add_crds_with(crds, |_| None)
    }

    /// [`Catalog::add_crds`], taking a CRD that stays from `ready` when it was compiled
    /// before ([`CompiledCrd`]); only the others are compiled here.
    ///
    /// # Errors
    /// As [`Catalog::add_crds`], whether the failing CRD was compiled here or before.
    pub fn add_crds_with<C>(
        &mut self,
        crds: &[(&Value, C)],
        mut ready: impl FnMut(&Value) -> Option<CompiledCrd>,
    ) -> Result<(), (C, SchemaError)>
    where
        C: Clone + Send + Sync,
    {
        let mut last: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, (crd, _)) in crds.iter().enumerate() {
            if let Some(key) = crd_key(crd) {
                last.insert(key, i);
            }
        }
        let mut kept: Vec<usize> = last.into_values().collect();
        kept.sort_unstable();
        let before: Vec<Option<CompiledCrd>> = kept.iter().map(|&i| ready(crds[i].0)).collect();
        let compiled: Vec<Result<Option<(CrdKey, Crd)>, SchemaError>> = kept
            .par_iter()
            .zip(before)
            .map(|(&i, before)| before.map_or_else(|| compile_crd(crds[i].0), |c| c.0))
            .collect();
        for (i, result) in kept.into_iter().zip(compiled) {
            match result {
                Ok(Some((key, crd))) => {
                    self.crds.insert(key, crd);
                }
                Ok(None) => {}
                Err(e) => return Err((crds[i].1.clone(), e)),
            }
        }
        Ok(())
    }

    /// Whether a CRD for `group`/`kind` is known.
    #[must_use]
    pub fn has_crd(&self, group: &str, kind: &str) -> bool {
        self.crds.contains_key(&(group.to_owned(), kind.to_owned()))
    }

    /// Checks one object as a create with strict field validation would.
    #[must_use]
    pub fn validate(&self, object: &Value) -> Verdict {
        let api_version = object["apiVersion"].as_str().unwrap_or("");
        let kind = object["kind"].as_str().unwrap_or("");
        let (group, version) = split_api_version(api_version);
        let b = &self.builtin;
        if let Some(info) = b
            .kinds
            .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))
        {
            let mut walk = Walk::new(&b.schemas, "");
            walk.check(info.node, object, true);
            let mut violations = walk.out;
            self.metadata(
                object,
                names::rule_of(group, kind),
                info.namespaced,
                &mut violations,
            );
            if group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition" {
                crd_name(object, &mut violations);
            }
            kinds::check(group, kind, object, &mut violations);
            return Verdict::Checked {
                violations,
                cel_unchecked: None,
            };
        }
        let Some(crd) = self.crds.get(&(group.to_owned(), kind.to_owned())) else {
            return Verdict::NoSchema;
        };
        let mut violations = Vec::new();
        let mut cel_unchecked = None;
        match crd.versions.get(version) {
            Some(v) if v.served => {
                if let Some(root) = v.root {
                    let mut walk = Walk::new(&crd.schemas, "");
                    walk.check(root, object, true);
                    violations = walk.out;
                }
                if v.cel {
                    cel_unchecked = Some(crd.name.clone());
                }
            }
            _ => violations.push(Violation::error(
                "apiVersion",
                format!(
                    "Unsupported value: {}: the CRD {} serves no version {version:?}",
                    quote(&object["apiVersion"]),
                    crd.name
                ),
            )),
        }
        if ADMISSION_DEFAULTED.contains(&(group, kind)) {
            for v in &mut violations {
                if v.message == "Required value" && !v.path.contains(['.', '[']) {
                    v.warning = true;
                    v.message.push_str(
                        " (OpenShift's admission defaults it; a plain API server refuses it)",
                    );
                }
            }
        }
        let mut meta = Walk::new(&b.schemas, "metadata");
        if let Some(m) = object.get("metadata") {
            meta.check(b.object_meta, m, true);
        }
        violations.extend(meta.out);
        self.metadata(object, NameRule::Subdomain, crd.namespaced, &mut violations);
        Verdict::Checked {
            violations,
            cel_unchecked,
        }
    }

    /// The name, namespace, labels and annotations.
    fn metadata(&self, object: &Value, rule: NameRule, namespaced: bool, out: &mut Vec<Violation>) {
        let meta = &object["metadata"];
        match meta["name"].as_str() {
            Some(name) => {
                if let Some(why) = names::check_name(rule, name) {
                    out.push(Violation::error(
                        "metadata.name",
                        format!("Invalid value: {name:?}: {why}"),
                    ));
                }
            }
            None if meta["generateName"].is_string() => {}
            None => out.push(Violation::error(
                "metadata.name",
                "Required value: name or generateName is required".to_owned(),
            )),
        }
        let namespace = meta["namespace"].as_str().filter(|s| !s.is_empty());
        match (namespaced, namespace) {
            (true, Some(ns)) => {
                if let Some(why) = names::label(ns) {
                    out.push(Violation::error(
                        "metadata.namespace",
                        format!("Invalid value: {ns:?}: {why}"),
                    ));
                }
            }
            (true, None) => out.push(Violation::error(
                "metadata.namespace",
                "Required value: the kind is namespaced; the CVO sends the object to the \
                 cluster-wide path, which the API server refuses"
                    .to_owned(),
            )),
            (false, Some(ns)) => out.push(Violation::warning(
                "metadata.namespace",
                format!(
                    "Invalid value: {ns:?}: the kind is cluster-scoped; the API server drops the \
                     namespace"
                ),
            )),
            (false, None) => {}
        }
        if let Some(labels) = meta["labels"].as_object() {
            for (k, v) in labels {
                if let Some(why) = names::qualified_name(k) {
                    out.push(Violation::error(
                        "metadata.labels",
                        format!("Invalid value: {k:?}: {why}"),
                    ));
                }
                if let Some(s) = v.as_str()
                    && let Some(why) = names::label_value(s)
                {
                    out.push(Violation::error(
                        &format!("metadata.labels[{k}]"),
                        format!("Invalid value: {s:?}: {why}"),
                    ));
                }
            }
        }
        if let Some(annotations) = meta["annotations"].as_object() {
            let mut total = 0;
            for (k, v) in annotations {
                total += k.len() + v.as_str().map_or(0, str::len);
                if let Some(why) = names::qualified_name(&k.to_lowercase()) {
                    out.push(Violation::error(
                        "metadata.annotations",
                        format!("Invalid value: {k:?}: {why}"),
                    ));
                }
            }
            if total > 256 * 1024 {
                out.push(Violation::error(
                    "metadata.annotations",
                    format!("Too long: may not be more than 262144 bytes (has {total})"),
                ));
            }
        }
    }
}

/// A CRD's name is `<plural>.<group>`.
fn crd_name(crd: &Value, out: &mut Vec<Violation>) {
    let name = crd.pointer("/metadata/name").and_then(Value::as_str);
    let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str);
    let group = crd.pointer("/spec/group").and_then(Value::as_str);
    if let (Some(name), Some(plural), Some(group)) = (name, plural, group)
        && name != format!("{plural}.{group}")
    {
        out.push(Violation::error(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
}

fn has_cel(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.iter().any(|(k, v)| {
            (k == "x-kubernetes-validations" && v.as_array().is_some_and(|a| !a.is_empty()))
                || has_cel(v)
        }),
        Value::Array(a) => a.iter().any(has_cel),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
